from django.urls import include, path

# GET/POST /agents and GET/PUT/PATCH/DELETE /agents/{id} are on the api floor (api/agents/): an agent's
# body carries its phone numbers, its list item its documents and calls of today.
urlpatterns = [
    path("", include("agents.tools.urls")),
]
