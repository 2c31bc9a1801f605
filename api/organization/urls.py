from django.urls import path

from api.organization import apis

urlpatterns = [
    path("organization", apis.OrganizationApi.as_view(), name="organization"),
]
