from rest_framework import serializers

from kit.fields import E164Field, StrictUUIDField
from telephony.models import PhoneNumberStatus


class AssignRequestSerializer(serializers.Serializer):
    phoneNumberId = StrictUUIDField(source="phone_number_id")
    handoffPhoneNumber = E164Field(source="handoff_phone_number", required=False, allow_null=True, default=None)


class AssignResponseSerializer(serializers.Serializer):
    phoneNumberId = serializers.UUIDField()


class PhoneNumberSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    phoneNumber = serializers.CharField()
    friendlyName = serializers.CharField()
    status = serializers.ChoiceField(PhoneNumberStatus.choices)
    source = serializers.CharField()  # type: ignore[assignment]  # the API field "source" shadows Field.source in the stubs (DRF pops declared fields)
    provider = serializers.CharField()
    setupStatus = serializers.CharField()
    assignedAgentId = serializers.UUIDField(allow_null=True)
    assignedAgentName = serializers.CharField(allow_null=True)
    countryCode = serializers.CharField()


class AssignedNumberSerializer(serializers.Serializer):
    phoneNumberId = serializers.UUIDField()
    phoneNumber = serializers.CharField()
    friendlyName = serializers.CharField()
    handoffPhoneNumber = serializers.CharField(allow_null=True)
