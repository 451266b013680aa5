"""Readers, writers and validation for every file format vqadiag understands.

Data is read once here, validated, and handed on as plain records and arrays.
"""
