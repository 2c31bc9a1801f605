"""The api floor: the REST resources whose body joins several apps, between the project shell
(voiceagent) and the highest domain app (telephony); docs/architecture.md, "Floors".

A resource lives in the app its URL names (`make lint`: voiceagent/rooms.py). When what it shows joins apps
above that one, its views and reads live here instead, under the resource's name: the agent resource
(api/agents/: an agent's list item carries its numbers, documents and calls of today) and the organization
(api/organization/: its destination countries default to its numbers'). Its writes and rules stay in its
app (agents/services.py, accounts/services.py), with what the apps above add registered there when they
start. Nothing below imports this package.
"""
