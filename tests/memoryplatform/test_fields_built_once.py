"""FieldsBuiltOnce: one set of fields per class and thread, re-pointed at each instance, same validation."""

import threading

from usermemory.api.serializers import MemoryUpsertInputSerializer

GOOD = {"userId": "u1", "key": "k", "value": {"a": 1}, "groupIds": ["g1"]}
BAD = {"userId": 5, "key": "k", "value": 1, "visibility": "nope", "groupIds": [7]}


def test_instances_validate_alone_in_turn():
    bad = MemoryUpsertInputSerializer(data=BAD)
    assert not bad.is_valid()
    good = MemoryUpsertInputSerializer(data=GOOD)
    assert good.is_valid(), good.errors
    assert good.validated_data["groupIds"] == ["g1"] and good.validated_data["visibility"] == "self"
    assert set(bad.errors) == {"userId", "visibility", "groupIds"}
    assert all(f.parent is good for f in good.fields.values())
    # Read again by an earlier instance, the fields are pointed back at it; read twice, they stay.
    assert all(f.parent is bad for f in bad.fields.values()) and bad.fields.serializer is bad
    assert all(f.parent is good for f in good.fields.values()) and good.fields is good.fields


def test_each_thread_builds_its_own_fields():
    seen: list[object] = []

    def build() -> None:
        serializer = MemoryUpsertInputSerializer(data=GOOD)
        assert serializer.is_valid()
        seen.append(serializer.fields)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 2 and seen[0] is not seen[1]
    mine = MemoryUpsertInputSerializer(data=GOOD).fields
    assert mine is MemoryUpsertInputSerializer(data=BAD).fields and mine is not seen[0]
