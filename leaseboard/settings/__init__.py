"""One env-driven settings package for every environment (DJANGO_SETTINGS_MODULE=
leaseboard.settings).

With no configuration Leaseboard runs embedded (SQLite in WAL mode, a file-system broker);
`DATABASE_URL`, `REDIS_URL` and `CELERY_BROKER_URL` switch it to PostgreSQL and Redis.
Bad values fail fast at start-up, naming the variable.

Each module is one subject and imports what it needs of the others by name (base first:
the data directory, DEBUG, TESTING), so the order below is only the alphabet's.
docs/deployment.md ("Settings that matter") lists the variables a production deployment
sets; each module's comments say what each of its settings does. tests/settings checks
that every module is read and each setting is defined once.
"""

from leaseboard.settings.base import *  # noqa: F403
from leaseboard.settings.database import *  # noqa: F403
from leaseboard.settings.domain import *  # noqa: F403
from leaseboard.settings.keys import *  # noqa: F403
from leaseboard.settings.observability import *  # noqa: F403
from leaseboard.settings.security import *  # noqa: F403
from leaseboard.settings.worker import *  # noqa: F403
