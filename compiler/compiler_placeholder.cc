namespace safex::compiler {}
