"""Evaluation data and scoring (BFCL, workloads, serving traces). Library code never imports it."""
