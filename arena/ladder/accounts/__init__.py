"""Owners' accounts: sign-up, passwords, sessions, invitations, admins."""
