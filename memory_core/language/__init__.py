"""Language: text analysis, sanitising, dates and numbers, sentences and lexicons (ja + en)."""
