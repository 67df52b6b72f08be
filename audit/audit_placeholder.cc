namespace safex::audit {}
