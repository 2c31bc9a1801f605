"""The organization resource (/public/v1/organization): the view (`apis.py`) and its route (`urls.py`).
What it shows joins the organization (accounts) with its numbers (telephony). Import the module you need;
nothing is re-exported here.
"""
