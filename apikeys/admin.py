from django.contrib import admin

from apikeys.models import Agent, AgentGroup, ApiKey


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    extra = 0
    can_delete = False
    fields = ["prefix", "role", "label", "created_at", "last_used_at", "expires_at", "revoked_at"]
    readonly_fields = fields
    show_change_link = True

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["id", "display_name", "status", "model", "last_active_at", "created_at"]
    list_filter = ["status"]
    search_fields = ["id", "display_name"]
    readonly_fields = ["last_active_at", "created_at", "updated_at"]
    inlines = [ApiKeyInline]


@admin.register(AgentGroup)
class AgentGroupAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_at"]
    list_filter = ["created_at"]
    search_fields = ["id", "name"]
    readonly_fields = ["created_at"]
    filter_horizontal = ["members"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "role", "agent", "label", "last_used_at", "expires_at", "revoked_at"]
    list_filter = ["role", "revoked_at"]
    search_fields = ["prefix", "label", "agent__id"]
    list_select_related = ["agent"]
    raw_id_fields = ["agent", "created_by"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at", "created_by"]
    exclude = ["digest"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        # Keys are made by `manage.py createapikey` (which shows the raw key once) until the admin's
        # create-and-show-once page lands.
        return False
