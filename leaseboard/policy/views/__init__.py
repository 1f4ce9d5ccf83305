"""Settings pages (admins), mounted under /settings/ by leaseboard.policy.urls."""
