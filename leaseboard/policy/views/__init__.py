"""Settings pages (admins), mounted under /settings/ by leaseboard.policy.urls; and the
OpenID Connect sign-in views (sso), mounted under /oidc/ by leaseboard.urls."""
