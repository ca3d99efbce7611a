"""The theory lesson: the formula, its terms measured on the servers, and the record kept of them."""
