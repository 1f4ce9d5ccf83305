from django.apps import AppConfig


class TakeoversConfig(AppConfig):
    # The sweep calls leaseboard.takeovers.sweep.takeover_sweep_step itself (sweeps sit
    # above takeovers in the layer order, tests/architecture/test_layers.py).
    name = "leaseboard.takeovers"
    label = "takeovers"
    verbose_name = "Leaseboard takeovers"

    def ready(self) -> None:
        from leaseboard.core.badges import awaiting_approver_register
        from leaseboard.takeovers.selectors.requests import takeover_requests_pending

        # Pending takeover requests count on the approver's badge (leaseboard/core/badges.py).
        awaiting_approver_register("takeover requests", takeover_requests_pending)
