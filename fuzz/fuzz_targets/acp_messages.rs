#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| drover::fuzz::acp_messages(data));
