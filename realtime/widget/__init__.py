"""Widget keys and the embeddable widget's sessions (docs/widget.md): a publishable key per agent (`pk_...`)
that can do one thing, open a realtime session with that agent from a page whose Origin it lists."""
