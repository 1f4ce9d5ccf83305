from django.urls import path

from leaseboard.sandbox import views

app_name = "sandbox"
urlpatterns = [path("payments", views.payments, name="payments")]
