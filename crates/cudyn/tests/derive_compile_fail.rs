//! `#[derive(DeviceRepr)]` refuses at compile time what it cannot make sound, with a message
//! naming the problem and the fix: each file in compile_fail/ must fail to compile with exactly
//! the error in its .stderr (`TRYBUILD=overwrite` rewrites them after a deliberate change).

#[test]
fn the_derive_refuses_what_it_cannot_make_sound() {
    trybuild::TestCases::new().compile_fail("tests/compile_fail/*.rs");
}
