namespace safex::dsl {}
