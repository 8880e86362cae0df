"""`toolweave bench ...`: benchmark suites, their report and plots (the `bench` extra)."""
