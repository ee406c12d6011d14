"""Azure adapters: AI Search, Table Storage, Service Bus, Entra ID tokens, Azure Monitor."""
