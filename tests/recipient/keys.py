"""The signing key the recipient tests that need no server share: one private key, its key
id, its public keys table (kid -> raw public key) and a fixed clock reading for tokens."""

from __future__ import annotations

from leaseboard_recipient.tokens import generate_private_key, key_id, public_key_raw

KEY = generate_private_key()
KID = key_id(public_key_raw(KEY))
PUBLIC = {KID: public_key_raw(KEY)}
NOW = 1_700_000_000_000
