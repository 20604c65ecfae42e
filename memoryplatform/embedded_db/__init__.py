"""The embedded PostgreSQL default (DATABASE_URL unset): ENGINE ``memoryplatform.embedded_db``.

A documented Django pattern, a backend subclassing the built-in PostgreSQL one: the server is started on the
first connection a process makes, so commands that never touch the database (``--help``, ``check`` without
database tags) never start it. See ``server.py`` for the lifecycle.
"""
