"""The base every app builds on, importing none of them: the live events pages receive and how
they reach the sockets (`live_events`, `groups`, `socket_events`), the shared Redis pools, compiled
queries, spreadsheet-safe cells, form fields, the read-only admin, chart figures, the typed
signed-in request and the bounded JSON parser. `tests/test_layers.py` keeps it below the apps."""
