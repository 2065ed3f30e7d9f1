"""Corpus MDX files we expect to reject, with the reason a user should see."""

REJECTED = {
    # HiveWE's negative fixtures.
    "stijnherfst__HiveWE/tests/fixtures/mdx/bpos_count_overflow_v900.mdx":
        "chunk BPOS at byte 1425: bind pose matrix count 536870912 needs 25769803776 bytes but only 48 remain",
    "stijnherfst__HiveWE/tests/fixtures/mdx/matrix_indices_short_v800.mdx":
        "MTGC groups need 4 matrix indices but MATS holds 1",
    "stijnherfst__HiveWE/tests/fixtures/mdx/track_count_overflow_v800.mdx":
        "track KGTR declares 4294967295 keys",
    # War3ModelView's broken test model: the LITE chunk's size stops before the light's KLAC track.
    "AMISD666__War3ModelView/testmodel/nwdg32.mdx":
        "found track KLAC where a chunk should start: the size of the chunk LITE before it is too small",
    # war3mdlx's "all" test file has a geoset with one vertex and the triangle (0, 1, 2).
    "zengfanfan__war3mdlx/test/all.mdx": "PVTX index 1 is vertex 1, past the 1 vertices",
}
