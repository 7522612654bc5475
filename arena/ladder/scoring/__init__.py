"""What a finished match changes and shows, as pure functions: ratings, failures, pauses, statistics."""
