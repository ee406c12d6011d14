"""The domain: records, messages, search options, policy, ranking, fusion and access, pure."""
