"""Settings URLs, mounted under /settings/."""

from __future__ import annotations

from django.urls import path

from leaseboard.policy.views import credentials, deliveries, people, policy, queues

app_name = "policy"

# deliberate: one path() a URL (Django's declarative shape), as every urls.py.
urlpatterns = [
    path("", queues.home, name="home"),
    path("queues/new", queues.queue_new, name="queue_new"),
    path("queues/<slug:name>/", queues.queue, name="queue"),
    path("queues/<slug:name>/rules/new", queues.rule_edit, name="rule_new"),
    path("queues/<slug:name>/rules/default", queues.rule_default, name="rule_default"),
    path("queues/<slug:name>/rules/<str:rule>/", queues.rule_edit, name="rule"),
    path("queues/<slug:name>/rules/<str:rule>/delete", queues.rule_delete, name="rule_delete"),
    path("queues/<slug:name>/rules/<str:rule>/move", queues.rule_move, name="rule_move"),
    path("queues/<slug:name>/notify", queues.notify, name="notify"),
    # The rules for every queue: the queue pages' rule views with no queue.
    path("global/", queues.global_rules, name="global"),
    path("global/rules/new", queues.rule_edit, name="global_rule_new"),
    path("global/rules/default", queues.rule_default, name="global_rule_default"),
    path("global/rules/<str:rule>/", queues.rule_edit, name="global_rule"),
    path("global/rules/<str:rule>/delete", queues.rule_delete, name="global_rule_delete"),
    path("global/rules/<str:rule>/move", queues.rule_move, name="global_rule_move"),
    path("explain", policy.explain, name="explain"),
    path("four-eyes", policy.four_eyes_change, name="four_eyes"),
    path("changes/", policy.changes, name="changes"),
    path("changes/<int:pk>/<str:decision>", policy.change_decide, name="change_decide"),
    path("history/", policy.history, name="history"),
    path("deliveries/", deliveries.deliveries, name="deliveries"),
    path("people/", people.people_page, name="people"),
    path("people/<str:username>/", people.person_update, name="person"),
    path("people/<str:username>/password", people.person_password, name="person_password"),
    path("credentials/", credentials.credentials_page, name="credentials"),
    # path: an agent named before names were checked may hold a "/" (a 500 on this page).
    path("credentials/<path:name>/<str:action>", credentials.credential_act, name="credential_act"),
    path("recipients/new", credentials.recipient_new, name="recipient_new"),
    path("recipients/<int:pk>/<str:action>", credentials.recipient_act, name="recipient_act"),
]
