from django.urls import include, path

# GET/POST /agents and GET/PUT/PATCH/DELETE /agents/{id} are telephony's (telephony/agent_apis.py): an
# agent's body carries its phone numbers.
urlpatterns = [
    path("", include("agents.tools.urls")),
]
