"""The HTTP API over the memory service: the dispatcher, its handlers and the HTTP kit they share."""
