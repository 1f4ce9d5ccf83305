"""Configuration writes, one module per subject: queues (settings, envelope, notification
targets), rules (the rule set, four-eyes), people, credentials, config (as code). Each
public function is the outermost transaction, asks the authority, and audits before ->
after; asking for what already holds records nothing."""
