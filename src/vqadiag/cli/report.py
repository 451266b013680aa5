"""Commands of this module are added by their issue (placeholder registers nothing yet)."""
