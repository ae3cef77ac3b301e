"""Bad input gets a clear error: validation, the bad-input catalogue, fuzzing."""
