"""The browser viewer: a starlette app served by hypercorn's trio worker.

`app.build_app` composes the pieces (the replay player here, tournament and ladder pages from the
arena); `timeline` turns a replay into frames by re-simulating it; `serving` binds and runs the app.
Nothing here names a game: each game's drawing lives in ``static/games/<game>.js``, chosen by the
replay's header, and reads the engine's own ``frame()`` and ``pending()``.
"""
