"""The Azure Functions app's bodies (``function_app.py`` holds only the triggers): the per-worker runtime,
the queue and timer work, and the HTTP functions over the HTTP API. No Azure SDK is imported here."""
