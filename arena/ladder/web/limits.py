"""The owners' limits a ladder's pages start with, unless its host sets them (`cellarena ladder web`
options): known to the command, which shows them in --help, and to `AccountSettings`, without the
command importing the pages."""

#: Active bots each owner may have (``--max-bots-per-owner``).
MAX_BOTS_PER_OWNER = 5
#: Sign-ups from one client address in an hour (``--signups-per-hour``).
SIGNUPS_PER_HOUR = 5
#: Password checks (logins, the API's) from one client address in an hour (``--logins-per-hour``);
#: each costs an argon2 hash.
LOGINS_PER_HOUR = 30
