pub mod account;
pub mod ops;
