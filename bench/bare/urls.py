"""The bare project's two views."""

from django.urls import path

from bench.bare.views import grant, renew

urlpatterns = [
    path("renew/<uuid:lease_id>", renew),
    path("grant/<str:key>", grant),
]
