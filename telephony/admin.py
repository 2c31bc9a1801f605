from django.contrib import admin

from telephony.models import PhoneNumber


@admin.register(PhoneNumber)
class PhoneNumberAdmin(admin.ModelAdmin):
    list_display = ("phone_number", "friendly_name", "organization", "status", "assigned_agent", "country_code")
    list_filter = ("status", "source", "provider", "setup_status", "country_code")
    search_fields = ("phone_number", "friendly_name", "organization__name", "assigned_agent__name")
    readonly_fields = ("id", "created_at", "assigned_at")
    list_select_related = ("organization", "assigned_agent")
    raw_id_fields = ("organization", "assigned_agent")
