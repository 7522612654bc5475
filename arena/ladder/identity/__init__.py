"""Who is who on a ladder: bot tokens, and the names of owners, bots and games with their look-alikes."""
