"""Diagnosis orchestration: ``vqadiag diagnose`` runs every registered suite on one model."""
