"""Tools for people: benchmarks, evaluations, doctor, dead letters, the demo, progress and reports."""
