from django.apps import AppConfig


class TakeoversConfig(AppConfig):
    # Nothing to wire: the sweep calls leaseboard.takeovers.sweep.takeover_sweep_step itself
    # (sweeps sit above takeovers in the layer order, tests/architecture/test_layers.py).
    name = "leaseboard.takeovers"
    label = "takeovers"
    verbose_name = "Leaseboard takeovers"
