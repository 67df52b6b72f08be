#include "plan/address_class.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

namespace safex::plan {
namespace {

AddressClass C(const char* s) {
  auto a = IpAddress::Parse(s);
  EXPECT_TRUE(a.has_value()) << s;
  return a ? Classify(*a) : AddressClass::kReserved;
}

TEST(IpAddressTest, ParsesStrictLiterals) {
  auto a = IpAddress::Parse("192.0.2.1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->family, AF_INET);
  EXPECT_EQ(a->ToString(), "192.0.2.1");
  auto b = IpAddress::Parse("2001:DB8:0:0::1");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->family, AF_INET6);
  EXPECT_EQ(b->ToString(), "2001:db8::1");
  for (const char* bad :
       {"", "1.2.3", "1.2.3.4.5", "01.2.3.4", "256.1.1.1", " 1.2.3.4", "1.2.3.4 ", "[::1]",
        "fe80::1%eth0", "::1:", "1.2.3.4/32", "example.com", "0x7f.0.0.1", "2130706433", ":::"}) {
    EXPECT_FALSE(IpAddress::Parse(bad)) << bad;
  }
  EXPECT_FALSE(IpAddress::Parse(std::string_view("1.2.3.4\0", 8)));
}

TEST(AddressClassTest, Ipv4Classes) {
  EXPECT_EQ(C("8.8.8.8"), AddressClass::kPublic);
  EXPECT_EQ(C("127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(C("127.255.1.2"), AddressClass::kLoopback);
  EXPECT_EQ(C("169.254.169.254"), AddressClass::kMetadata);
  EXPECT_EQ(C("169.254.170.2"), AddressClass::kMetadata);
  EXPECT_EQ(C("100.100.100.200"), AddressClass::kMetadata);
  EXPECT_EQ(C("169.254.1.1"), AddressClass::kLinkLocal);
  EXPECT_EQ(C("10.1.2.3"), AddressClass::kPrivate);
  EXPECT_EQ(C("172.16.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(C("172.31.255.255"), AddressClass::kPrivate);
  EXPECT_EQ(C("172.32.0.1"), AddressClass::kPublic);
  EXPECT_EQ(C("192.168.1.1"), AddressClass::kPrivate);
  EXPECT_EQ(C("100.64.0.1"), AddressClass::kCgnat);
  EXPECT_EQ(C("100.127.255.255"), AddressClass::kCgnat);
  EXPECT_EQ(C("100.128.0.1"), AddressClass::kPublic);
  EXPECT_EQ(C("224.0.0.1"), AddressClass::kMulticast);
  EXPECT_EQ(C("239.255.255.250"), AddressClass::kMulticast);
  EXPECT_EQ(C("0.0.0.0"), AddressClass::kUnspecified);
  EXPECT_EQ(C("0.1.2.3"), AddressClass::kUnspecified);
  EXPECT_EQ(C("255.255.255.255"), AddressClass::kBroadcast);
  EXPECT_EQ(C("198.18.0.1"), AddressClass::kBenchmarking);
  EXPECT_EQ(C("198.19.255.254"), AddressClass::kBenchmarking);
  EXPECT_EQ(C("198.20.0.1"), AddressClass::kPublic);
  EXPECT_EQ(C("192.0.2.7"), AddressClass::kDocumentation);
  EXPECT_EQ(C("203.0.113.9"), AddressClass::kDocumentation);
  EXPECT_EQ(C("240.0.0.1"), AddressClass::kReserved);
  EXPECT_EQ(C("192.0.0.8"), AddressClass::kReserved);
}

TEST(AddressClassTest, Ipv6Classes) {
  EXPECT_EQ(C("2606:4700::1111"), AddressClass::kPublic);
  EXPECT_EQ(C("::1"), AddressClass::kLoopback);
  EXPECT_EQ(C("::"), AddressClass::kUnspecified);
  EXPECT_EQ(C("fe80::1"), AddressClass::kLinkLocal);
  EXPECT_EQ(C("febf::1"), AddressClass::kLinkLocal);
  EXPECT_EQ(C("fd00:ec2::254"), AddressClass::kMetadata);
  EXPECT_EQ(C("fd00:ec2::253"), AddressClass::kPrivate);
  EXPECT_EQ(C("fc00::1"), AddressClass::kPrivate);
  EXPECT_EQ(C("fdff::1"), AddressClass::kPrivate);
  EXPECT_EQ(C("ff02::1"), AddressClass::kMulticast);
  EXPECT_EQ(C("2001:db8::1"), AddressClass::kDocumentation);
  EXPECT_EQ(C("2001:2::1"), AddressClass::kBenchmarking);
  EXPECT_EQ(C("100::1"), AddressClass::kReserved);
  EXPECT_EQ(C("2001::1"), AddressClass::kReserved);  // Teredo
  EXPECT_EQ(C("4000::1"), AddressClass::kReserved);
}

TEST(AddressClassTest, EmbeddedIpv4IsJudgedByItsIpv4Address) {
  EXPECT_EQ(C("::ffff:127.0.0.1"), AddressClass::kLoopback);
  EXPECT_EQ(C("::ffff:169.254.169.254"), AddressClass::kMetadata);
  EXPECT_EQ(C("::ffff:10.0.0.1"), AddressClass::kPrivate);
  EXPECT_EQ(C("::ffff:8.8.8.8"), AddressClass::kPublic);
  EXPECT_EQ(C("::ffff:7f00:1"), AddressClass::kLoopback);       // same address, hex tail
  EXPECT_EQ(C("64:ff9b::a9fe:a9fe"), AddressClass::kMetadata);  // NAT64 of 169.254.169.254
  EXPECT_EQ(C("2002:7f00:1::1"), AddressClass::kLoopback);      // 6to4 of 127.0.0.1
  EXPECT_EQ(C("2002:808:808::1"), AddressClass::kPublic);
}

TEST(CidrTest, ParseAndContains) {
  auto c = Cidr::Parse("10.20.0.0/16");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->ToString(), "10.20.0.0/16");
  EXPECT_TRUE(c->Contains(*IpAddress::Parse("10.20.3.4")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("10.21.0.1")));
  EXPECT_TRUE(c->Contains(*IpAddress::Parse("::ffff:10.20.9.9")));
  EXPECT_FALSE(c->Contains(*IpAddress::Parse("fd00::1")));
  auto v6 = Cidr::Parse("fd12:3456::/32");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->Contains(*IpAddress::Parse("fd12:3456::9")));
  EXPECT_FALSE(v6->Contains(*IpAddress::Parse("fd12:3457::9")));
  EXPECT_EQ(Cidr::Parse("192.0.2.1")->prefix, 32);
  auto zero = Cidr::Parse("0.0.0.0/0");
  ASSERT_TRUE(zero);
  EXPECT_TRUE(zero->Contains(*IpAddress::Parse("8.8.8.8")));
  for (const char* bad : {"10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/08", "::/129",
                          "10.0.0.0/-1", "10.0.0.0/8/8", "x/8"}) {
    EXPECT_FALSE(Cidr::Parse(bad)) << bad;
  }
}

TEST(EgressAllowedTest, ForbiddenClassesAndOperatorRanges) {
  Ceilings c = DefaultCeilings();
  auto ok = [&](const char* s) { return EgressAllowed(*IpAddress::Parse(s), c); };
  EXPECT_TRUE(ok("8.8.8.8"));
  EXPECT_TRUE(ok("198.18.0.2"));
  EXPECT_TRUE(ok("2606:4700::1111"));
  for (const char* no :
       {"127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "169.254.3.3", "fe80::1",
        "10.20.1.1", "192.168.0.1", "100.64.0.1", "224.0.0.1", "0.0.0.0", "::", "255.255.255.255",
        "240.0.0.1", "::ffff:127.0.0.1", "::ffff:10.20.1.1"}) {
    EXPECT_FALSE(ok(no)) << no;
  }
  c.allowed_egress_ranges = {"10.20.0.0/16", "100.64.0.0/10", "0.0.0.0/0", "::/0"};
  EXPECT_TRUE(ok("10.20.1.1"));
  EXPECT_TRUE(ok("::ffff:10.20.1.1"));
  EXPECT_TRUE(ok("100.64.0.1"));
  EXPECT_TRUE(ok("192.168.0.1"));  // 0.0.0.0/0 admits private...
  // ...but never loopback, link-local, metadata or the rest.
  for (const char* no : {"127.0.0.1", "::1", "169.254.169.254", "fd00:ec2::254", "169.254.3.3",
                         "fe80::1", "224.0.0.1", "0.0.0.0", "255.255.255.255"}) {
    EXPECT_FALSE(ok(no)) << no;
  }
}

}  // namespace
}  // namespace safex::plan
