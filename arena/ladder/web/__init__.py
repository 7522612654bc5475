"""The ladder's web site: public, owners' and community pages, the app that mounts them, templates."""
