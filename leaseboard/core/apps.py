from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "leaseboard.core"
    label = "core"
    verbose_name = "Leaseboard runtime"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from leaseboard.core.badges import awaiting_approver_register
        from leaseboard.core.deadline import refuse_past_deadline
        from leaseboard.core.selectors import effects_awaiting_approval
        from leaseboard.core.services.signin_audit import connect_sign_in_audit

        connect_sign_in_audit()
        awaiting_approver_register("effects", effects_awaiting_approval)
        # A request whose deadline passed while it connected goes no further (docs/design.md §14).
        connection_created.connect(
            refuse_past_deadline, dispatch_uid="leaseboard.core.refuse_past_deadline"
        )
