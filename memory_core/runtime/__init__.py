"""Compute shared by the embedded host and Azure Functions: queue workers, scheduling, batching, fairness."""
