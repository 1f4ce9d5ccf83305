"""A bare Django project: the framework's own ceiling for Leaseboard's hot paths.

Its own settings (SecurityMiddleware and CommonMiddleware only; no sessions, auth,
messages, CSRF or templates; no apps), two raw-SQL views on the bench database, served by
the same gunicorn configuration and loaded by the same wrk settings as the API in
`make bench` (bench/run_all.py), so API ÷ bare is what Leaseboard costs above Django.
"""
