//! Pieces more than one page draws the same way. Plain components: whichever island
//! renders one carries it to the browser.

pub mod table;
