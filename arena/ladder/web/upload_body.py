"""An uploaded archive as a request carries it: the raw body (``application/gzip``, ``application/zip``:
the API and ``ladder submit``) or the owner page's form (``multipart/form-data``, parsed by the
standard library's MIME parser). Either way the body is read by the one size-capped reader
(`server.web.json_body.read_body`): 413 once it passes the limit, the rest read and dropped up to a bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser

from starlette.exceptions import HTTPException
from starlette.requests import Request

from cellarena.server.web.json_body import read_body

#: The media types taken as the body, and the kind of archive each is.
ARCHIVE_TYPES = {
    "application/gzip": "tar.gz",
    "application/x-gzip": "tar.gz",
    "application/x-compressed-tar": "tar.gz",
    "application/zip": "zip",
    "application/x-zip-compressed": "zip",
}
#: What a form adds around its file: boundaries, headers, the CSRF field.
FORM_SLACK = 16 * 1024
#: The form's field that holds the file.
FILE_FIELD = "archive"
_WRONG_TYPE = "send the archive as the body with Content-Type application/gzip (a .tar.gz) or application/zip"


@dataclass
class Upload:
    """An archive from a request: its bytes and kind ("tar.gz" or "zip"), and a form's other fields."""

    data: bytes
    kind: str
    fields: dict[str, str] = field(default_factory=dict)


def kind_of_name(filename: str) -> str | None:
    lowered = filename.lower()
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return "zip" if lowered.endswith(".zip") else None


async def read_upload(request: Request, limit: int) -> Upload:
    """The request's archive, of at most ``limit`` bytes: 415 for another media type, 413 past the
    limit, 400 for a form without its file."""
    content_type = request.headers.get("content-type", "")
    media = content_type.split(";")[0].strip().lower()
    if media in ARCHIVE_TYPES:
        return Upload(await read_body(request, limit), ARCHIVE_TYPES[media])
    if media != "multipart/form-data":
        raise HTTPException(415, f"{_WRONG_TYPE}, not {media[:60] or 'no Content-Type'}")
    body = await read_body(request, limit + FORM_SLACK)
    return _from_form(content_type, body)


def _from_form(content_type: str, body: bytes) -> Upload:
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        raise HTTPException(400, "the form's body is not multipart/form-data; send it from the bot's page")
    fields: dict[str, str] = {}
    upload: Upload | None = None
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        if name != FILE_FIELD:
            fields.setdefault(name, payload[:1024].decode("utf-8", "replace"))
            continue
        filename = part.get_filename() or ""
        kind = kind_of_name(filename) or ARCHIVE_TYPES.get(part.get_content_type())
        if kind is None:
            raise HTTPException(415, f"{filename[:80]!r}: choose a .tar.gz or a .zip of your bot's folder")
        upload = Upload(payload, kind)
    if upload is None or not upload.data:
        raise HTTPException(400, "the form holds no archive; choose your bot's .tar.gz or .zip")
    upload.fields = fields
    return upload
